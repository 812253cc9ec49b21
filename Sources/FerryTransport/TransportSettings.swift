import FerryModel
import Foundation

/// What the transport needs beyond each request: proxies and trusted certificates, read once from the
/// environment (as curl reads them) and the config file.
public struct TransportSettings: Sendable, Equatable {
    /// Proxy for http:// URLs (`http_proxy`; curl reads only the lower-case name for it).
    public var httpProxy: String?
    /// Proxy for https:// URLs (`https_proxy`, `HTTPS_PROXY`).
    public var httpsProxy: String?
    /// Hosts that bypass the proxy (`no_proxy`, `NO_PROXY`: comma-separated names, domains, `*`).
    public var noProxy: String?
    /// A PEM bundle of trusted certificate authorities instead of the system's (`SSL_CERT_FILE`, `[network] ca_file`).
    public var caFile: String?
    /// A directory of hashed CA certificates (`SSL_CERT_DIR`).
    public var caDirectory: String?
    /// sftp:// and scp://: the known hosts, keys and login name (SSHSettings).
    public var ssh: SSHSettings

    public init(httpProxy: String? = nil, httpsProxy: String? = nil, noProxy: String? = nil,
                caFile: String? = nil, caDirectory: String? = nil, ssh: SSHSettings = .processDefault) {
        self.httpProxy = httpProxy
        self.httpsProxy = httpsProxy
        self.noProxy = noProxy
        self.caFile = caFile
        self.caDirectory = caDirectory
        self.ssh = ssh
    }

    /// Reads the variables curl reads (and ssh's: SSHSettings): `http_proxy`, `https_proxy`/`HTTPS_PROXY`, `all_proxy`/`ALL_PROXY` for
    /// either when the specific one is unset, `no_proxy`/`NO_PROXY`, `SSL_CERT_FILE`, `SSL_CERT_DIR`.
    /// Empty values count as unset.
    public static func fromEnvironment(_ environment: [String: String]) -> TransportSettings {
        func value(_ names: String...) -> String? {
            for name in names {
                if let value = environment[name]?.trimmingCharacters(in: .whitespaces), !value.isEmpty { return value }
            }
            return nil
        }
        let all = value("all_proxy", "ALL_PROXY")
        return TransportSettings(
            httpProxy: value("http_proxy") ?? all,
            httpsProxy: value("https_proxy", "HTTPS_PROXY") ?? all,
            noProxy: value("no_proxy", "NO_PROXY"),
            caFile: value("SSL_CERT_FILE"),
            caDirectory: value("SSL_CERT_DIR"),
            ssh: .fromEnvironment(environment))
    }

    /// The proxy for `url`, or nil for a direct connection (the no_proxy list is applied by libcurl).
    func proxy(for url: URL) -> String? {
        url.scheme?.lowercased() == "https" ? httpsProxy : httpProxy
    }
}
