"""Many rows through one statement, without SQLAlchemy's per-row work.

``conn.execute(statement, rows)`` builds and type-processes every row's parameters in Python: about
as long as the database takes to write the row. The indexer writes tens of thousands of rows a
range, all plain ints, strings, bools and None, which both drivers (sqlite3, psycopg) take as
they are. ``execute_many`` compiles the statement once for the connection's dialect and hands the
rows to the driver's ``executemany``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import itemgetter
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.sql import Executable


def execute_many(
    conn: Connection, statement: Executable, rows: Sequence[Mapping[str, Any]]
) -> None:
    """Runs ``statement`` once per row of ``rows`` (each with the same keys: its parameters)."""
    if not rows:
        return
    compiled = statement.compile(dialect=conn.dialect, column_keys=list(rows[0]))
    defaults = _scalar_defaults(statement)
    missing = {name: value for name, value in defaults.items() if name not in rows[0]}
    if missing:
        rows = [{**missing, **row} for row in rows]
    if compiled.positional:
        names = compiled.positiontup or []
        if len(names) == 1:
            params: list[Any] = [(row[names[0]],) for row in rows]
        else:
            params = list(map(itemgetter(*names), rows))
    else:
        params = list(rows)
    conn.exec_driver_sql(str(compiled), params)


def _scalar_defaults(statement: Executable) -> dict[str, Any]:
    """The Python-side scalar defaults of the statement's table (an INSERT or UPDATE adds the
    columns that have one; SQLAlchemy would fill them in row by row)."""
    table = getattr(statement, "table", None)
    columns = getattr(table, "columns", ())
    return {
        column.key: column.default.arg
        for column in columns
        if column.default is not None and column.default.is_scalar
    }
