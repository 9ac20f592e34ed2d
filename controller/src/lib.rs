//! Skein's controller core: a pure state machine (events in, commands out)
//! that places replicas, elects leaders and tracks ISRs. No I/O lives here.
