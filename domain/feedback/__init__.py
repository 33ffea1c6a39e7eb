"""Send feedback and the notes that Admin's Feedback tab reads: validation, storage, Linear."""
