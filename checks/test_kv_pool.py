"""Predicted KV pool per replica against what the deployment requires."""


def test_kv_pool(gpulayout_check):
    gpulayout_check("kv_pool")
