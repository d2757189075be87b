"""WSGI applications for swflows used alone (the ``wsgi`` extra)."""
