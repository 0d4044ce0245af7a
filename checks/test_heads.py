"""Do attention heads, KV heads, layers (PP) and experts divide the way the engine requires?"""


def test_head_divisibility(gpulayout_check):
    gpulayout_check("heads")
