"""Are the GPUs the layout needs visible, whole, not MIG slices, alike inside a TP group, and enough?"""


def test_gpus(gpulayout_check):
    gpulayout_check("placement")
