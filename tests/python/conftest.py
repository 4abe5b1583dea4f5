# The module's tests run on every rank under mpiexec.mpich -n N; rank 0 reports (the plugin).
pytest_plugins = ["ringtrain.pytest_plugin"]
