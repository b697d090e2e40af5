"""The GraphQL API (Strawberry): the schema's types, resolvers and per-operation extensions.

Resolvers turn inputs into domain commands and run them through the store's unit of work;
types wrap the store's models. Nothing here speaks HTTP or SQL.
"""
