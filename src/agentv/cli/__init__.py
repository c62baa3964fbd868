"""Thin typer commands; each calls one library function."""
