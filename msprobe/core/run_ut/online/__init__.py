"""Online run_ut: the device side streams API calls, the bench side re-runs them into run_ut's CSVs.

wire.py (message format), transport.py (TCP, TLS, shared directory), tls.py, sender.py (device side's bounded
background sending), bench.py (calls -> run_ut cases -> CSVs), command.py (`run_ut` with `is_online`).
The device side is the dump task msprobe/core/dump/tasks/online_run_ut.py.
"""
