"""Measure the deployments under load one after the other and say which serves best (opt-in:
``--gpulayout-measure``; ``--gpulayout-measure-baseline FILE`` fails a regression)."""


def test_measure(gpulayout_measure_suite):
    gpulayout_measure_suite()
