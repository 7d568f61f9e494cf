"""FastMCP 4.2's proxy as its docs build one: `create_proxy` of a stdio server, served over
streamable HTTP on 127.0.0.1. For the gateway's peers bench (gateway/benches/peers.rs).

    python fastmcp_proxy.py PORT COMMAND [ARG...]
"""

import sys

from fastmcp.client.transports import StdioTransport
from fastmcp.server import create_proxy


def main() -> None:
    port, command, *args = sys.argv[1:]
    proxy = create_proxy(StdioTransport(command=command, args=args), name="fastmcp-proxy")
    proxy.run(transport="http", host="127.0.0.1", port=int(port), show_banner=False, log_level="warning")


if __name__ == "__main__":
    main()
