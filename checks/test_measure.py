"""``measure``: every deployment of the manifest measured under its ``measure:`` load, one after the other,
and which serves best (opt-in: ``--gpulayout-measure``; ``--gpulayout-measure-baseline FILE`` fails a
regression). The figures are JUnit properties (``gpulayout.measure.<deployment>.<key>``).

The measurement is ``pytest_gpulayout/measure/``; this module is its item in the suite.
"""


def test_measure(gpulayout_measure_suite):
    gpulayout_measure_suite()
