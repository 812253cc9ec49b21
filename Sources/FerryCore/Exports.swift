// FerryCore is the transfer service as front ends see it: the layers below come with it.
@_exported import FerryEngine
@_exported import FerryModel
@_exported import FerryStorage
@_exported import FerryTransport
