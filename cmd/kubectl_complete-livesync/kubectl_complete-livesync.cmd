@REM kubectl_complete-livesync: kubectl (>= 1.26) runs this for "kubectl livesync <TAB>" when it is on PATH.
@kubectl-livesync.exe __complete %*
