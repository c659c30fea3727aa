import { describe, expect, it } from "vitest";
import {
  checkAbsoluteUrl,
  checkPublicUrl,
  classifyHostLiteral,
  isDataUrl,
  parseDataUrl,
} from "../../src/api/urls.js";

describe("classifyHostLiteral", () => {
  it.each([
    ["127.0.0.1", "loopback"],
    ["127.255.255.254", "loopback"],
    ["localhost", "loopback"],
    ["LocalHost", "loopback"],
    ["localhost.", "loopback"],
    ["api.localhost", "loopback"],
    ["local%68ost", "loopback"],
    ["::1", "loopback"],
    ["[::1]", "loopback"],
    ["0:0:0:0:0:0:0:1", "loopback"],
    ["::ffff:127.0.0.1", "loopback"],
    ["[::ffff:7f00:1]", "loopback"],
    ["64:ff9b::7f00:1", "loopback"],
    ["127.1", "loopback"],
    ["2130706433", "loopback"],
    ["0x7f.0.0.1", "loopback"],
    ["10.0.0.1", "private"],
    ["10.255.255.255", "private"],
    ["172.16.0.1", "private"],
    ["172.31.255.255", "private"],
    ["192.168.1.1", "private"],
    ["100.64.0.1", "private"],
    ["100.127.255.255", "private"],
    ["fc00::1", "private"],
    ["fd12:3456::1", "private"],
    ["::ffff:10.1.2.3", "private"],
    ["2002:c0a8:0101::1", "private"],
    ["169.254.169.254", "link-local"],
    ["fe80::1", "link-local"],
    ["fe80::1%eth0", "link-local"],
    ["[febf::1]", "link-local"],
    ["0.0.0.0", "unspecified"],
    ["0.1.2.3", "unspecified"],
    ["::", "unspecified"],
    ["224.0.0.1", "multicast"],
    ["239.255.255.250", "multicast"],
    ["ff02::1", "multicast"],
    ["240.0.0.1", "reserved"],
    ["255.255.255.255", "reserved"],
    ["192.0.2.10", "reserved"],
    ["198.51.100.7", "reserved"],
    ["203.0.113.9", "reserved"],
    ["198.18.0.1", "reserved"],
    ["2001:db8::1", "reserved"],
    ["::127.0.0.1", "reserved"],
    ["4000::1", "reserved"],
    ["8.8.8.8", "public"],
    ["93.184.216.34", "public"],
    ["172.32.0.1", "public"],
    ["172.15.255.255", "public"],
    ["100.128.0.1", "public"],
    ["192.169.0.1", "public"],
    ["11.0.0.1", "public"],
    ["2606:4700:4700::1111", "public"],
    ["[2a00:1450:4001:80b::200e]", "public"],
    ["::ffff:8.8.8.8", "public"],
    ["2002:0808:0808::1", "public"],
    ["example.com", "name"],
    ["localhost.example.com", "name"],
    ["my-localhost", "name"],
    ["cdn.example.org.", "name"],
  ] as const)("%s is %s", (host, expected) => {
    expect(classifyHostLiteral(host)).toBe(expected);
  });
});

describe("checkAbsoluteUrl", () => {
  it("accepts absolute http and https URLs", () => {
    expect(checkAbsoluteUrl("https://example.com/a.png")).toBeNull();
    expect(checkAbsoluteUrl("HTTP://example.com:8080/x?y=1#z")).toBeNull();
  });

  it("rejects URLs without a scheme or host", () => {
    expect(checkAbsoluteUrl("example.com/a.png")).toBe(
      'expected an absolute http or https URL like "https://example.com/path", got "example.com/a.png"',
    );
    expect(checkAbsoluteUrl("/a.png")).toContain("expected an absolute http or https URL");
    expect(checkAbsoluteUrl("http:example.com")).toContain('with "//" and a host after the scheme');
    expect(checkAbsoluteUrl("http:///a.png")).toContain('with "//" and a host after the scheme');
  });

  it("rejects other schemes and names the scheme sent", () => {
    expect(checkAbsoluteUrl("ftp://example.com/a.png")).toBe(
      'expected an absolute http or https URL, got scheme "ftp"',
    );
    expect(checkAbsoluteUrl("file:///etc/passwd")).toContain('got scheme "file"');
    expect(checkAbsoluteUrl("ftp://example.com/", ["ftp:"])).toBeNull();
  });

  it("rejects whitespace, control characters and backslashes in the host part", () => {
    expect(checkAbsoluteUrl(" https://example.com/")).toContain("must not start or end with whitespace");
    expect(checkAbsoluteUrl("https://exa\nmple.com/")).toContain("must not contain control characters");
    expect(checkAbsoluteUrl("https://evil.com\\@127.0.0.1/")).toContain("backslash");
    expect(checkAbsoluteUrl("https://exa mple.com/")).toContain("does not parse as a URL");
  });
});

describe("checkPublicUrl", () => {
  it("accepts public addresses and names", () => {
    expect(checkPublicUrl("https://example.com/hook")).toBeNull();
    expect(checkPublicUrl("http://8.8.8.8:8080/hook")).toBeNull();
    expect(checkPublicUrl("https://[2606:4700:4700::1111]/hook")).toBeNull();
    expect(checkPublicUrl("https://example.com/a@b")).toBeNull();
  });

  it("rejects non-absolute URLs and other schemes", () => {
    expect(checkPublicUrl("hook")).toContain(
      'expected an absolute http or https URL like "https://example.com/path", got "hook"',
    );
    expect(checkPublicUrl("ws://example.com/")).toBe(
      'expected an absolute http or https URL, got scheme "ws"',
    );
    expect(checkPublicUrl("ws://example.com/", { schemes: ["ws", "wss"] })).toBeNull();
  });

  it("rejects user information without echoing the credentials", () => {
    const reason = checkPublicUrl("https://user:s3cret@example.com/hook");
    expect(reason).toContain("must not contain user information");
    expect(reason).not.toContain("s3cret");
    expect(checkPublicUrl("https://@example.com/")).toContain("user information");
    // user information is refused even where private addresses are allowed
    expect(checkPublicUrl("http://u@127.0.0.1/", { allowPrivate: true })).toContain("user information");
  });

  it.each([
    ["http://127.0.0.1/hook", "got 127.0.0.1, which is a loopback address"],
    ["http://localhost:3000/hook", "got localhost, which is a loopback address"],
    ["http://[::1]/hook", "got [::1], which is a loopback address"],
    ["http://127.1/hook", "got 127.0.0.1, which is a loopback address"],
    ["http://10.1.2.3/hook", "got 10.1.2.3, which is a private-network address"],
    ["http://[::ffff:192.168.0.1]/", "which is a private-network address"],
    ["http://169.254.169.254/latest/meta-data", "which is a link-local address"],
    ["http://0.0.0.0/", "which is an unspecified address"],
    ["http://224.0.0.1/", "which is a multicast address"],
    ["http://240.0.0.1/", "which is a reserved, non-public address"],
  ])("rejects %s", (url, fragment) => {
    const reason = checkPublicUrl(url);
    expect(reason).toContain("expected a public host");
    expect(reason).toContain(fragment);
  });

  it("accepts non-public addresses when allowPrivate is set", () => {
    expect(checkPublicUrl("http://127.0.0.1:8080/hook", { allowPrivate: true })).toBeNull();
    expect(checkPublicUrl("http://192.168.1.10/hook", { allowPrivate: true })).toBeNull();
    expect(checkPublicUrl("http://192.168.1.10/hook", { allowPrivate: false })).toContain("private-network");
  });
});

describe("data URLs", () => {
  it("recognises data URLs", () => {
    expect(isDataUrl("data:image/png;base64,iVBORw0KGgo=")).toBe(true);
    expect(isDataUrl("DATA:,hello")).toBe(true);
    expect(isDataUrl("https://example.com/data:x,y")).toBe(false);
    expect(isDataUrl("data:image/png;base64")).toBe(false);
  });

  it("decodes base64 data URLs", () => {
    const parsed = parseDataUrl("data:image/PNG;base64,aGVsbG8=");
    expect(parsed?.mime).toBe("image/png");
    expect(parsed?.data.toString("utf8")).toBe("hello");
    expect(parseDataUrl("data:audio/mpeg;name=a.mp3;base64,aGk")?.data.toString()).toBe("hi");
    expect(parseDataUrl("data:image/png;base64,aGVs\nbG8=")?.data.toString()).toBe("hello");
  });

  it("decodes percent-encoded data URLs", () => {
    const parsed = parseDataUrl("data:text/plain;charset=utf-8,caf%C3%A9%20au%20lait");
    expect(parsed?.mime).toBe("text/plain");
    expect(parsed?.data.toString("utf8")).toBe("café au lait");
    expect(parseDataUrl("data:,100%zz")?.data.toString()).toBe("100%zz");
    expect(parseDataUrl("data:,x")?.mime).toBe("text/plain");
  });

  it("rejects malformed data URLs", () => {
    expect(parseDataUrl("https://example.com/a.png")).toBeNull();
    expect(parseDataUrl("data:image/png;base64")).toBeNull();
    expect(parseDataUrl("data:image/png;base64,not*base64")).toBeNull();
    expect(parseDataUrl("data:image/png;base64,aGVsb")).toBeNull();
    expect(parseDataUrl("data:image/png;base64,a=bc")).toBeNull();
    expect(parseDataUrl("data:image;base64,aGVsbG8=")).toBeNull();
  });
});
