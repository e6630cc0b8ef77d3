"""`python -m dbcrew.settings > docs/configuration.md`: print the configuration page."""

from dbcrew.settings.configuration_page import configuration_markdown

print(configuration_markdown(), end="")
