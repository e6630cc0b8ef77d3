"""The parsed target holds its password privately: copies keep it, every serialized form leaves it out."""

from __future__ import annotations

import pickle

from fastapi.encoders import jsonable_encoder

from dbcrew.roles.crew.context import RunContext
from dbcrew.targets import parse_target

URL = "postgresql://auditor:s3cr%40t@db.example:6432/shop"


def test_password_is_parsed_and_kept_by_copies():
    target = parse_target(URL)
    assert target._password == "s3cr@t"
    assert (
        target.model_copy(update={"statement_timeout_ms": 5})._password == "s3cr@t"
    )  # the worker's per-task copy
    assert parse_target("postgresql://auditor@db.example/shop")._password is None


def test_no_serialized_form_of_a_run_carries_the_password(tmp_path):
    run = RunContext(target=parse_target(URL), out_dir=tmp_path)
    forms = [
        run.model_dump_json(),
        repr(run),
        str(run.model_dump()),
        str(jsonable_encoder({"run": run})),
    ]  # Prefect's parameter encoding
    assert all("s3cr" not in form for form in forms)
    assert run.target.display == "postgresql://auditor@db.example:6432/shop"


def test_a_pickled_target_loses_its_password():
    data = pickle.dumps(parse_target(URL))
    assert b"s3cr" not in data and pickle.loads(data)._password is None
