// swift-tools-version:6.0
import PackageDescription

// Release builds of the programs link Swift's runtime and Foundation into the binary (`-static-stdlib`): the
// binary runs where no Swift toolchain is installed (it needs libc, libcurl, libsqlite3 and libncursesw), and
// starts and runs faster (no relocation of a dozen Swift libraries: see docs/performance.md). Foundation's static
// networking library names `-lcurl`; Support/link holds a linker script that resolves it to the runtime library.
// Debug builds (the tests) link dynamically, as before.
let packageDirectory = String(#filePath.dropLast("/Package.swift".count))
/// On the executables' own sources too: compiled so, they name the static libraries Foundation needs (CoreFoundation, ...).
let staticInReleaseSources: [SwiftSetting] = [.unsafeFlags(["-static-stdlib"], .when(platforms: [.linux], configuration: .release))]
let staticInRelease: [LinkerSetting] = [
    .unsafeFlags(["-static-stdlib", "-Xlinker", "-L" + packageDirectory + "/Support/link"],
                 .when(platforms: [.linux], configuration: .release)),
]
// ferry's release link puts the code a run executes first, in one place (lld, the toolchain's linker, with the list
// scripts/order-hot-code writes), and exports no symbols (nothing loads into ferry; the linker then also drops the
// code nothing calls). A run maps 7 MiB of the binary's code instead of 14 (docs/performance.md, "Memory: the code a
// run executes, in one place").
let hotCodeFirstInRelease: [LinkerSetting] = [
    .unsafeFlags(["-use-ld=lld",
                  "-Xlinker", "--symbol-ordering-file=" + packageDirectory + "/Support/link/ferry.order",
                  "-Xlinker", "--no-warn-symbol-ordering", "-Xlinker", "--no-export-dynamic"],
                 .when(platforms: [.linux], configuration: .release)),
]

let package = Package(
    name: "ferry",
    products: [
        .executable(name: "ferry", targets: ["ferry"]),
        .library(name: "FerryCore", targets: ["FerryCore"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        // TLS for the test server only (HTTPS tests); ferry itself reaches TLS through libcurl (CCurl).
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        // HTTP/2 for the test server only (the transport's h2 tests); ferry speaks it through libcurl.
        .package(url: "https://github.com/apple/swift-nio-http2", from: "1.46.0"),
        // The IETF resumable-upload server for the tests (NIOResumableUpload) and the HTTP types it speaks.
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/LebJe/TOMLKit", from: "0.6.0"),
        // Tests only: generated inputs for the parsers (the torture run's fuzzing campaign).
        .package(url: "https://github.com/x-sheep/swift-property-based", from: "2.0.1"),
    ],
    targets: [
        // libcurl 7.x, opened at run time (no development headers needed): the transport under URLSession.
        .target(name: "CCurl"),
        // SHA-256 through the system's libcrypto, opened at run time like libcurl (a portable implementation when
        // it cannot be): no crypto library is built with ferry (swift-crypto's BoringSSL cost every build minutes).
        .target(name: "CDigest"),
        // The transfer service, one target per layer, each importing only those below it (the compiler
        // refuses an import the other way): no terminal code, no knowledge of any front end.
        // Values every layer shares: specs, states, snapshots, commands, errors, file naming, terminal-safe text.
        .target(name: "FerryModel", dependencies: ["CDigest"]),
        // Where the queue and the files live: SQLite, .part files, name claims, the state directory.
        .target(name: "FerryStorage", dependencies: [
            "FerryModel", "CDigest", "CFileSystem",
            .product(name: "GRDB", package: "GRDB.swift"),
            // SQLite's C API (the system's libsqlite3, which GRDB links): an add binds its rows directly.
            .product(name: "GRDBSQLite", package: "GRDB.swift"),
        ]),
        // libc's file-system calls that Glibc's module leaves out: extended attributes (a tree's copies are marked),
        // statfs and syncfs (files made durable together).
        .systemLibrary(name: "CFileSystem", path: "Sources/CFileSystem"),
        // Bytes on the wire: libcurl's multi interface under URLSession (FerryURLProtocol).
        .target(name: "FerryTransport", dependencies: ["FerryModel", "CCurl"]),
        // The queue's life: TransferManager, each Transfer, attempts, rules, upload bodies.
        .target(name: "FerryEngine", dependencies: [
            "FerryModel", "FerryStorage", "FerryTransport", "CXML",
        ]),
        // libxml2's HTML parser (libxml2-dev): the directory listings a tree's walk reads.
        .systemLibrary(name: "CXML", path: "Sources/CXML", pkgConfig: "libxml-2.0", providers: [.apt(["libxml2-dev"])]),
        // The engine as others reach it (control socket, commands, hooks, one assembly) and the config file;
        // re-exports the layers below, so front ends import FerryCore alone.
        .target(
            name: "FerryCore",
            dependencies: [
                "FerryModel", "FerryStorage", "FerryTransport", "FerryEngine",
                .product(name: "TOMLKit", package: "TOMLKit"),
                // The control socket's server (line framing, writability, the peer's credentials), as the RPC's.
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        // ncursesw (libncurses-dev), with a shim header for what Swift cannot import.
        .systemLibrary(name: "CNcurses", path: "Sources/CNcurses"),
        // Restores the terminal from fatal-signal handlers when ferry crashes with curses active.
        .target(name: "CCrashGuard"),
        // The terminal UI: pure rendering into a Canvas, one reducer, and CursesTerminal (the only ncurses caller).
        .target(name: "FerryTUI", dependencies: ["FerryCore", "CNcurses", "CCrashGuard"]),
        // aria2's JSON-RPC, a front end of the engine over HTTP and WebSocket (SwiftNIO's HTTP/1 and WebSocket).
        .target(name: "FerryRPC", dependencies: [
            "FerryCore",
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "NIOWebSocket", package: "swift-nio"),
        ]),
        // The executable only parses arguments and wires FerryCore to a front end.
        // Process-wide settings made before main (malloc's arenas); linked by the executable alone.
        .target(name: "CFerryProcess"),
        .executableTarget(
            name: "ferry",
            dependencies: [
                "FerryCore", "FerryTUI", "FerryRPC", "CFerryProcess",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: staticInReleaseSources,
            linkerSettings: staticInRelease + hotCodeFirstInRelease
        ),
        // A real HTTP/1.1 (and, over TLS, HTTP/2) server for tests, started in-process on 127.0.0.1, that can misbehave on
        // purpose; and upload servers that resume (swift-nio-extras' IETF one, a tus one).
        .target(
            name: "TestHTTPServer",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOResumableUpload", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                // The bodies' SHA-256 (FerryModel's, checked against known answers in DigestTests).
                "FerryModel", "FerryStorage",
                // Children started as the engine starts its own (Spawn).
                "FerryCore",
            ],
            path: "Tests/TestHTTPServer"
        ),
        // A throttled local HTTP server for scripts/tui-e2e (not shipped): prints its port, serves until killed.
        .executableTarget(name: "TestServerTool", dependencies: ["TestHTTPServer"], path: "Tests/TestServerTool"),
        // The 10,000-item frame micro-benchmark, meant for a release build (`swift run -c release RenderBench`).
        .executableTarget(name: "RenderBench", dependencies: ["FerryTUI", "FerryCore"], path: "Tests/RenderBench"),
        // URLSession alone, every byte discarded: the floor scripts/bench compares ferry with.
        // With FLOOR_TRANSPORT=ferry, URLSession over ferry's transport alone: the floor of what the engine adds.
        .executableTarget(name: "URLSessionFloor", dependencies: ["FerryTransport"], path: "Tests/URLSessionFloor",
                         swiftSettings: staticInReleaseSources, linkerSettings: staticInRelease),
        // Runs a URLSession with ferry's delegate queue alone in a process, as ferry does (DelegateQueueTests).
        .executableTarget(name: "DelegateQueueProbe", dependencies: ["FerryCore"], path: "Tests/DelegateQueueProbe"),
        .testTarget(name: "FerryCoreTests", dependencies: [
            "FerryCore", "FerryModel", "FerryStorage", "FerryTransport", "FerryEngine",
            .product(name: "PropertyBased", package: "swift-property-based"),
            // An older schema written directly (the migration test).
            .product(name: "GRDB", package: "GRDB.swift"),
        ]),
        .testTarget(name: "FerryTUITests", dependencies: ["FerryTUI", "FerryCore", "FerryModel", "FerryEngine", "CNcurses", "TestHTTPServer"]),
        .testTarget(
            name: "FerryIntegrationTests",
            dependencies: [
                "FerryCore", "FerryModel", "FerryStorage", "FerryTransport", "FerryEngine", "TestHTTPServer", "FerryRPC",
                // The row's words of a failure (FailureKindTests), beside the RPC's code and the hooks' variables.
                "FerryTUI",
                // A TLS client of its own, to check the test server's HTTPS without anything installed.
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                // A WebSocket client for the aria2 RPC's tests.
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                // The queue's database opened directly, to damage it as a disk or another version could.
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
