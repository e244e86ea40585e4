"""Health and breaker dynamics of a real local fleet: the pieces of `bench/health_dynamics.py`.

`fleet` starts and stops one fleet per scenario, `calls` sends requests
through the official `openai` SDK and reduces what came back, `scenarios`
holds the seven measurements. Only 127.0.0.1 is ever addressed.
"""
