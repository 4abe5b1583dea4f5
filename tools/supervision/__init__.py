"""ringtrain's supervisor: relaunch a job until it finishes, over a host list that shrinks when
a host is lost and grows back when it returns; a ledger of its worlds. Entry: cli.main."""
