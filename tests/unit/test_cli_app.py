"""`dbcrew`'s command line: app.py only creates the typer app and registers the commands, each command group
living in a module of its own under dbcrew/cli/, and `dbcrew --help` lists them in the order users know."""

from __future__ import annotations

import ast
from pathlib import Path

import typer.main

from dbcrew.cli.app import app

APP = Path(__file__).resolve().parents[2] / "dbcrew" / "cli" / "app.py"
COMMANDS = [
    "review",
    "diagnose",
    "baseline",
    "extract-knowledge",
    "demo",
    "history",
    "ask",
    "watch",
    "incidents",
    "server",
    "mcp",
    "inventory",
]


def test_the_help_lists_every_command_in_its_order():
    assert list(typer.main.get_command(app).commands) == COMMANDS


def test_app_py_registers_commands_it_does_not_define():
    tree = ast.parse(APP.read_text())
    assert [
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    ] == ["main"]
    group = typer.main.get_command(app)
    callbacks = [
        command.callback
        for command in [
            *group.commands.values(),
            *group.commands["inventory"].commands.values(),
        ]
        if command.callback is not None
    ]
    assert len(callbacks) == len(COMMANDS) - 1 + 2  # the inventory group's check and publish
    assert {callback.__module__ for callback in callbacks}.isdisjoint({"dbcrew.cli.app"})
