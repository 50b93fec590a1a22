"""The SAPO sharing experiment: N nodes, several I/J configurations, the same task streams.

``config``   what to run (command line or TOML), ``inprocess`` the exchange without chain or store,
``chain``    the exchange through the real protocol (Anvil, coordinator, local store),
``runner``   the units (configuration x seed) with per-round checkpoints, ``outputs`` CSV, summary
and plots. ``swarm experiment`` is the command; docs/EXPERIMENT.md the committed report.
"""
