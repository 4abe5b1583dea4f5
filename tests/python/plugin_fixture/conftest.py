pytest_plugins = ["ringtrain.pytest_plugin"]
