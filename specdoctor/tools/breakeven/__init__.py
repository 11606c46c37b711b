"""Break-even: the accept length speculation must reach (modelled), and the relaunch grid that measures it."""
