"""The user's control over what the model learns and serves.

Gated promotion with rollback (`promotion.py`, `canary.py`), the dashboard (`dashboard.py`,
`static/dashboard.html`); explicit feedback and retract live beside them. Command line:
`python -m openclaw.control --help`. What each part promises and how to see it hold: README.md.
"""
