"""Command-line commands kept out of cli.py, each module registering its commands on `main`."""
