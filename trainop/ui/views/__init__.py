"""The UI's pages, one flask Blueprint per area: the list (jobs), a job's page and actions (job), its
logs (logs), the creation wizard (wizard) and sign-in (auth). Each reads the app's `Ui` (context.py)."""
