import FerryEngine
import FerryModel
import FerryStorage
import FerryTransport

/// What `ferry --version` says: the version, then the Swift it was built with and the transport in use.
public enum FerryVersion {
    public static let number = "0.1.0"

    #if swift(>=6.4)
    static let swift = "6.4 or newer"
    #elseif swift(>=6.3)
    static let swift = "6.3"
    #elseif swift(>=6.2)
    static let swift = "6.2"
    #elseif swift(>=6.1)
    static let swift = "6.1"
    #else
    static let swift = "6.0"
    #endif

    /// Two lines: `ferry 0.1.0`, then `Swift 6.3; transport: libcurl/7.88.1 ... (under URLSession)`.
    public static var text: String {
        "ferry \(number)\nSwift \(swift); transport: \(CurlTransport.libcurlVersion) (under URLSession, FerryURLProtocol)"
    }
}
