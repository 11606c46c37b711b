"""`python -m specdoctor`: the same command line as the `specdoctor` script."""

from specdoctor.cli import main

main()
