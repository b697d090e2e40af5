"""The HTTP edge (Starlette and uvicorn): the GraphQL endpoint, authentication, limits, request
ids, the access log, metrics, health and the pages people open (GraphiQL, the inspector)."""
