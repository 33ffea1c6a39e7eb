"""The store: the database engine and drivers, column types and ids, and the migrations."""
