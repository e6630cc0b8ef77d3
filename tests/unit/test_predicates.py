from dbcrew.operators.predicates import FilterColumn, filter_columns
from dbcrew.operators.sql import quote_ident


def test_filter_columns_from_normalized_statements():
    assert filter_columns("SELECT id, name FROM customers WHERE email = $1") == [
        FilterColumn(None, "customers", "email", "=")
    ]
    assert filter_columns("SELECT * FROM public.t x WHERE x.a = $1 AND $2 < x.b AND c IS NULL") == [
        FilterColumn("public", "t", "a", "="),
        FilterColumn("public", "t", "b", "<"),
        FilterColumn("public", "t", "c", "is null"),
    ]


def test_filter_columns_ignores_joins_ors_and_garbage():
    assert filter_columns("SELECT * FROM a JOIN b ON a.x = b.y WHERE a.z = $1") == []
    assert filter_columns("SELECT * FROM t WHERE a = $1 OR b = $2") == []
    assert filter_columns("this is not sql (") == []


def test_quote_ident_quotes_only_when_needed():
    assert quote_ident("orders") == "orders"
    assert quote_ident("order") == '"order"'
    assert quote_ident("Mixed") == '"Mixed"'
    assert quote_ident('we"ird') == '"we""ird"'
