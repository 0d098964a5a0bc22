"""The web console: static pages for operators (on the admin API) and tenants (on the gateway's
HTTP port), and the aiohttp routes that serve them (`console.serve`). See docs/console.md.

Imports nothing of Pier's other packages: the pages talk to the hosting API over HTTP only.
"""
