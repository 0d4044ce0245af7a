"""Do the nodes a deployment spans agree (engine, torch, Python, Ray), hold the same model, and use InfiniBand?"""


def test_cluster(gpulayout_check):
    gpulayout_check("cluster")
