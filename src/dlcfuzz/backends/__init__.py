"""Compilers under test, one module each."""
