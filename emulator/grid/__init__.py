"""Load sharing across the sites of a grid (England and Weissman): a grid file, migration rules, the
co-simulation of every site's scheduler, and replicated experiments with paired-t
intervals."""
