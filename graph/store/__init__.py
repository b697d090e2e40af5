"""Storage (SQLAlchemy, SQLModel): the tables, the engines, the unit of work, who sees what
(scope.py), a repository per aggregate, the search index, the event brokers, retention and
the migrations. The only package that speaks SQL."""
