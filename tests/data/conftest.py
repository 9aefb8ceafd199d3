# The runner-log corpus keeps the small projects its logs were captured from: their tests are data, with
# failures on purpose, not tests of this package.
collect_ignore_glob = ["runner_logs/sources/*"]
