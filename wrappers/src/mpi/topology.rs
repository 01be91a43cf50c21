//! Virtual topologies: what a communicator has, and making one on another communicator.
use super::{call, check, Comm, Info, MpiResult, OwnedComm};
use crate::ffi::*;
use std::os::raw::c_int;

/// A Cartesian topology: dimensions, periodicity, and this process's coordinates.
pub struct Cart {
    pub dims: Vec<c_int>,
    pub periods: Vec<c_int>,
    pub coords: Vec<c_int>,
}

/// A graph topology as MPI_Graph_get gives it.
pub struct Graph {
    pub index: Vec<c_int>,
    pub edges: Vec<c_int>,
}

/// A distributed graph's neighbour lists as MPI_Dist_graph_neighbors gives them.
pub struct DistGraph {
    pub sources: Vec<c_int>,
    pub source_weights: Vec<c_int>,
    pub destinations: Vec<c_int>,
    pub destination_weights: Vec<c_int>,
    pub weighted: bool,
}

impl Comm {
    /// `MPI_Topo_test`: `MPI_CART`, `MPI_GRAPH`, `MPI_DIST_GRAPH` or `MPI_UNDEFINED`.
    pub fn topology(self) -> MpiResult<c_int> {
        let mut t = MPI_UNDEFINED;
        check(call!(PMPI_Topo_test(self.0, &mut t)))?;
        Ok(t)
    }

    pub fn cart(self) -> MpiResult<Cart> {
        let mut ndims = 0;
        check(call!(PMPI_Cartdim_get(self.0, &mut ndims)))?;
        let n = ndims.max(1) as usize;
        let mut c = Cart { dims: vec![0; n], periods: vec![0; n], coords: vec![0; n] };
        check(call!(PMPI_Cart_get(self.0, ndims, c.dims.as_mut_ptr(), c.periods.as_mut_ptr(), c.coords.as_mut_ptr())))?;
        let n = ndims.max(0) as usize;
        c.dims.truncate(n);
        c.periods.truncate(n);
        c.coords.truncate(n);
        Ok(c)
    }

    /// `MPI_Cart_create` on this communicator with `cart`'s dimensions and periods.
    pub fn cart_create(self, cart: &Cart, reorder: bool) -> MpiResult<OwnedComm> {
        assert_eq!(cart.dims.len(), cart.periods.len());
        let mut new = MPI_COMM_NULL;
        let ndims = cart.dims.len() as c_int;
        check(call!(PMPI_Cart_create(
            self.0,
            ndims,
            cart.dims.as_ptr(),
            cart.periods.as_ptr(),
            reorder as c_int,
            &mut new
        )))?;
        Ok(OwnedComm::made(new))
    }

    pub fn graph(self) -> MpiResult<Graph> {
        let (mut nnodes, mut nedges) = (0, 0);
        check(call!(PMPI_Graphdims_get(self.0, &mut nnodes, &mut nedges)))?;
        let mut g = Graph { index: vec![0; nnodes.max(1) as usize], edges: vec![0; nedges.max(1) as usize] };
        check(call!(PMPI_Graph_get(self.0, nnodes, nedges, g.index.as_mut_ptr(), g.edges.as_mut_ptr())))?;
        g.index.truncate(nnodes.max(0) as usize);
        g.edges.truncate(nedges.max(0) as usize);
        Ok(g)
    }

    /// `MPI_Graph_create` on this communicator with `graph`'s index and edges.
    pub fn graph_create(self, graph: &Graph, reorder: bool) -> MpiResult<OwnedComm> {
        let needed = graph.index.last().copied().unwrap_or(0).max(0) as usize;
        assert!(graph.edges.len() >= needed, "graph_create: fewer edges than the index names");
        let mut new = MPI_COMM_NULL;
        let (idx, edges) = (graph.index.as_ptr(), graph.edges.as_ptr());
        check(call!(PMPI_Graph_create(self.0, graph.index.len() as c_int, idx, edges, reorder as c_int, &mut new)))?;
        Ok(OwnedComm::made(new))
    }

    pub fn dist_graph(self) -> MpiResult<DistGraph> {
        let (mut indegree, mut outdegree, mut weighted) = (0, 0, 0);
        check(call!(PMPI_Dist_graph_neighbors_count(self.0, &mut indegree, &mut outdegree, &mut weighted)))?;
        let (ni, no) = (indegree.max(1) as usize, outdegree.max(1) as usize);
        let mut g = DistGraph {
            sources: vec![0; ni],
            source_weights: vec![1; ni],
            destinations: vec![0; no],
            destination_weights: vec![1; no],
            weighted: weighted != 0,
        };
        check(call!(PMPI_Dist_graph_neighbors(
            self.0,
            indegree,
            g.sources.as_mut_ptr(),
            g.source_weights.as_mut_ptr(),
            outdegree,
            g.destinations.as_mut_ptr(),
            g.destination_weights.as_mut_ptr()
        )))?;
        g.sources.truncate(indegree.max(0) as usize);
        g.source_weights.truncate(indegree.max(0) as usize);
        g.destinations.truncate(outdegree.max(0) as usize);
        g.destination_weights.truncate(outdegree.max(0) as usize);
        Ok(g)
    }

    /// `MPI_Dist_graph_create_adjacent` on this communicator with `graph`'s lists and weights.
    pub fn dist_graph_create_adjacent(self, graph: &DistGraph, info: Info, reorder: bool) -> MpiResult<OwnedComm> {
        assert_eq!(graph.sources.len(), graph.source_weights.len());
        assert_eq!(graph.destinations.len(), graph.destination_weights.len());
        let mut new = MPI_COMM_NULL;
        check(call!(PMPI_Dist_graph_create_adjacent(
            self.0,
            graph.sources.len() as c_int,
            graph.sources.as_ptr(),
            graph.source_weights.as_ptr(),
            graph.destinations.len() as c_int,
            graph.destinations.as_ptr(),
            graph.destination_weights.as_ptr(),
            info.0,
            reorder as c_int,
            &mut new
        )))?;
        Ok(OwnedComm::made(new))
    }
}
