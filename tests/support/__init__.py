"""What the tests share, imported as ``support.<module>``: docs/testing.md, "Where the tests
are", says what each module holds."""
