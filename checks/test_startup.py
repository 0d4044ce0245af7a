"""The real thing: launch the engine briefly, read the KV pool it allocated, stop it (opt-in)."""


def test_startup(gpulayout_check):
    gpulayout_check("startup")
