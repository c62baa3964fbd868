"""Welcome mails for new sign-ups."""


def send_welcome(user: dict[str, str]) -> str:
    """Build the welcome mail for ``user`` and return the address it goes to."""
    address = user["email"]
    body = f"Welcome aboard, {user['name']}!"
    print(f"to={address} body={body}")
    return address
