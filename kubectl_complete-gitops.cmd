@rem kubectl (1.26 or newer) runs this to complete "kubectl gitops ..." on Windows:
@rem keep it on PATH beside kubectl-gitops.exe. It hands the words to the
@rem plugin's own cobra completion.
@kubectl-gitops.exe __complete %*
