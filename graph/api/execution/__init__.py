"""The steps around every operation, one strawberry extension per concern.

schema.py passes them to `Schema(extensions=...)` in this order (strawberry enters them in
order and leaves them in reverse): errors are masked last, after the observer has seen
them.
"""
