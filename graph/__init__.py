"""convograph: a GraphQL storage service for AI-agent conversations."""

__version__ = "0.1.0"
