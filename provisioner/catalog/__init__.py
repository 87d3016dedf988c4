"""The cluster catalog: which clusters have which pools, and the GPU slices each node gives.

`models` holds the tables, `migrations` their Alembic history, `store` reads and writes them
(SQLite by default, PostgreSQL at scale) through `statements` (the SQL) and `database` (the
engine), `sync` fills them from the clouds.
"""
