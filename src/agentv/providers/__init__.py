"""Step 5 of the data flow: a ``ProviderRequest`` goes to a target, a ``ProviderResponse`` comes back."""
