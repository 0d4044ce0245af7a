"""Is the link inside each TP group fast enough (NVLink/NVSwitch), or should it be PP?"""


def test_tp_link(gpulayout_check):
    gpulayout_check("links")
