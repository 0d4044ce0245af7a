"""Will the engine's free-memory checks at start-up pass (SGLang's 0.9 rule, vLLM's utilization rule)?"""


def test_memory_balance(gpulayout_check):
    gpulayout_check("balance")
