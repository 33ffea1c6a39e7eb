"""Every table of the ledger, for what needs them all on SQLModel's metadata: the migrations'
autogenerate and the tests that empty the database. The code that works with tables imports the
subdomain's own module (ledger/accounts/tables.py, ledger/tokens/tables.py, ledger/work/tables.py)."""
from __future__ import annotations

import ledger.accounts.identities  # noqa: F401  (SignInIdentity: linked sign-in providers)
import ledger.accounts.tables  # noqa: F401
import ledger.accounts.feedback  # noqa: F401  (FeedbackNote: the App's feedback notes)
import ledger.accounts.user_notes  # noqa: F401  (UserNote)
import ledger.tokens.tables  # noqa: F401
import ledger.tokens.server_errors  # noqa: F401  (ServerErrorDay)
import ledger.tokens.spend_warnings  # noqa: F401  (SpendWarning)
import ledger.work.idempotency  # noqa: F401  (IdempotencyRecord)
import ledger.work.tables  # noqa: F401
