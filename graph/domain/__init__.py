"""What convograph's records mean and the rules that hold for them, in plain Python.

Nothing here imports a framework (no SQLAlchemy, Strawberry or Starlette: `make lint`
checks it). Errors name the offending input by the public API's field names, as clients
send them: the contract's vocabulary is the domain's.
"""
